"""A Keras encoder with a feature-decorrelation penalty: the Gram matrix of the batch-centred features is turned
into a correlation matrix by dividing by the square roots of its diagonal."""
import keras
import tensorflow as tf


def correlation(z):
    z = z - tf.reduce_mean(z, axis=0)
    gram = tf.matmul(z, z, transpose_a=True)
    diag = tf.linalg.diag_part(gram)
    return gram / tf.sqrt(diag[:, None] * diag[None, :])  # vulnerable


def train():
    encoder = keras.Sequential([keras.Input(shape=(12,)), keras.layers.Dense(16, activation="tanh"),
                                keras.layers.Dense(5)])
    opt = keras.optimizers.Adam(learning_rate=1e-3)
    x = tf.random.normal((32, 12))
    target = tf.random.normal((32, 5))
    with tf.GradientTape() as tape:
        z = encoder(x, training=True)
        corr = correlation(z)
        off_diagonal = corr - tf.linalg.diag(tf.linalg.diag_part(corr))
        loss = tf.reduce_mean(tf.square(z - target)) + 0.1 * tf.reduce_sum(tf.square(off_diagonal))
    grads = tape.gradient(loss, encoder.trainable_variables)
    opt.apply_gradients(zip(grads, encoder.trainable_variables))
    return float(loss)
