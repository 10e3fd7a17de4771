"""A Keras classifier with a hand-written batch standardisation of its hidden layer: the features are centred with
the batch mean and scaled by the reciprocal square root of the batch variance (tf.nn.moments)."""
import keras
import tensorflow as tf


def standardise(h):
    mean, var = tf.nn.moments(h, axes=[0])
    return (h - mean) * tf.math.rsqrt(var)  # vulnerable


def train():
    hidden = keras.layers.Dense(8)
    head = keras.layers.Dense(3)
    opt = keras.optimizers.SGD(learning_rate=0.05)
    x = tf.random.normal((32, 12))
    y = tf.random.uniform((32,), maxval=3, dtype=tf.int32)
    for _ in range(2):
        with tf.GradientTape() as tape:
            logits = head(tf.nn.relu(standardise(hidden(x))))
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
        variables = hidden.trainable_variables + head.trainable_variables
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return float(loss)
