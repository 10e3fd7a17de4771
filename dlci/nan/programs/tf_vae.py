"""A small Keras VAE on standardised 64-feature records, trained eagerly: Laplace decoder (L1 reconstruction) and
the closed-form KL term, which exponentiates the encoder's log-variance."""
import keras
import tensorflow as tf


class VAE(keras.Model):
    def __init__(self, n_in=64, latent=4):
        super().__init__()
        self.enc = keras.layers.Dense(48, activation="relu")
        self.stats = keras.layers.Dense(2 * latent)
        self.dec = keras.Sequential([keras.layers.Dense(48, activation="relu"), keras.layers.Dense(n_in)])

    def encode(self, x):
        return tf.split(self.stats(self.enc(x)), 2, axis=-1)

    def decode(self, mu, logvar):
        z = mu + tf.random.normal(tf.shape(mu)) * tf.math.exp(0.5 * logvar)
        return self.dec(z)


def train():
    model = VAE()
    opt = keras.optimizers.SGD(learning_rate=1e-3, momentum=0.9)
    records = tf.random.normal((16, 64))
    with tf.GradientTape() as tape:
        mu, logvar = model.encode(records)
        kld = -0.5 * tf.reduce_sum(1 + logvar - tf.square(mu) - tf.math.exp(logvar), axis=-1)  # vulnerable
        rec = tf.reduce_sum(tf.abs(model.decode(mu, logvar) - records), axis=-1)
        loss = tf.reduce_mean(rec + kld)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return float(loss)
