"""A subclassed keras.Model regressor with a hand-written layer standardisation: each sample's hidden features are
centred and divided by their standard deviation (tf.math.reduce_std)."""
import keras
import tensorflow as tf


class Regressor(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(10)
        self.out = keras.layers.Dense(1)

    def standardise(self, h):
        mean = tf.reduce_mean(h, axis=-1, keepdims=True)
        return (h - mean) / tf.math.reduce_std(h, axis=-1, keepdims=True)  # vulnerable

    def call(self, x):
        return self.out(tf.tanh(self.standardise(self.hidden(x))))


def train():
    model = Regressor()
    opt = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
    x = tf.random.normal((24, 6))
    y = tf.random.normal((24, 1))
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return float(loss)
