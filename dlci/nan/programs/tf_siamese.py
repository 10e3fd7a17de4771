"""A Keras siamese tower trained with a contrastive loss on the Euclidean distance between the two embeddings, the
distance written as the square root of the summed squared difference."""
import keras
import tensorflow as tf


def distance(a, b):
    return tf.sqrt(tf.reduce_sum(tf.square(a - b), axis=1))  # vulnerable


def train():
    tower = keras.Sequential([keras.Input(shape=(10,)), keras.layers.Dense(16, activation="tanh"),
                              keras.layers.Dense(6)])
    opt = keras.optimizers.Adam(learning_rate=1e-3)
    left = tf.random.normal((24, 10))
    right = tf.random.normal((24, 10))
    same = tf.cast(tf.random.uniform((24,)) < 0.5, tf.float32)
    with tf.GradientTape() as tape:
        d = distance(tower(left, training=True), tower(right, training=True))
        loss = tf.reduce_mean(same * tf.square(d) + (1.0 - same) * tf.square(tf.maximum(1.0 - d, 0.0)))
    grads = tape.gradient(loss, tower.trainable_variables)
    opt.apply_gradients(zip(grads, tower.trainable_variables))
    return float(loss)
