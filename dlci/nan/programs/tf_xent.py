"""A Keras MLP classifier trained eagerly with a GradientTape and a hand-written categorical cross-entropy."""
import keras
import tensorflow as tf


def cross_entropy(labels, logits):
    probs = tf.nn.softmax(logits, axis=-1)
    log_probs = tf.math.log(probs)  # vulnerable
    return -tf.reduce_mean(tf.reduce_sum(labels * log_probs, axis=-1))


def train():
    model = keras.Sequential([keras.Input(shape=(20,)), keras.layers.Dense(32, activation="relu"),
                              keras.layers.Dense(4)])
    opt = keras.optimizers.SGD(learning_rate=0.1)
    x = tf.random.normal((32, 20))
    labels = tf.one_hot(tf.random.uniform((32,), maxval=4, dtype=tf.int32), depth=4)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = cross_entropy(labels, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
    return float(loss)
