"""The Keras classifier of tf_xent with the cross-entropy computed from logits by TensorFlow."""
import keras
import tensorflow as tf


def cross_entropy(labels, logits):
    return tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))


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
