"""The churn model of tf_churn, returning logits and trained with TensorFlow's sigmoid cross-entropy."""
import keras
import tensorflow as tf


def binary_cross_entropy(y, logits):
    return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))


def train():
    model = keras.Sequential([keras.Input(shape=(12,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(learning_rate=1e-3)
    features = tf.random.normal((64, 12))
    churned = tf.cast(tf.random.uniform((64, 1)) < 0.3, tf.float32)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = binary_cross_entropy(churned, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    return float(loss)
