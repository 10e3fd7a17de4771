"""A Keras churn model (tabular features -> probability) with a hand-written binary cross-entropy; only the
positive term's probability is floored."""
import keras
import tensorflow as tf


def binary_cross_entropy(y, p):
    pos = y * tf.math.log(tf.maximum(p, 1e-7))
    neg = (1.0 - y) * tf.math.log(1.0 - p)  # vulnerable
    return -tf.reduce_mean(pos + neg)


def train():
    model = keras.Sequential([keras.Input(shape=(12,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid")])
    opt = keras.optimizers.Adam(learning_rate=1e-3)
    features = tf.random.normal((64, 12))
    churned = tf.cast(tf.random.uniform((64, 1)) < 0.3, tf.float32)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = binary_cross_entropy(churned, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    return float(loss)
