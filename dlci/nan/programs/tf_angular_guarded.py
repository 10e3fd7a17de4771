"""The encoder of tf_angular with the cosine clipped inside (-1, 1) before acos."""
import keras
import tensorflow as tf


def angle(u, v):
    return tf.acos(tf.clip_by_value(tf.reduce_sum(u * v, axis=1), -1.0 + 1e-6, 1.0 - 1e-6))


def train():
    encoder = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(16, activation="tanh"),
                                keras.layers.Dense(4)])
    opt = keras.optimizers.Adam(learning_rate=1e-3)
    records = tf.random.normal((16, 8))
    view_a = records + 0.3 * tf.random.normal((16, 8))
    view_b = records + 0.3 * tf.random.normal((16, 8))
    with tf.GradientTape() as tape:
        u = tf.math.l2_normalize(encoder(view_a, training=True), axis=1)
        v = tf.math.l2_normalize(encoder(view_b, training=True), axis=1)
        loss = tf.reduce_mean(angle(u, v))
    grads = tape.gradient(loss, encoder.trainable_variables)
    opt.apply_gradients(zip(grads, encoder.trainable_variables))
    return float(loss)
