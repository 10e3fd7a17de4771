"""A Keras tower producing ReLU embeddings, L2-normalised by hand, scored against item embeddings (two-tower
recommender, in-batch softmax)."""
import keras
import tensorflow as tf


def l2_normalize(h):
    return tf.math.divide(h, tf.norm(h, axis=1, keepdims=True))  # vulnerable


def train():
    user_tower = keras.Sequential([keras.Input(shape=(16,)), keras.layers.Dense(32, activation="relu"),
                                   keras.layers.Dense(12, activation="relu")])
    items = tf.Variable(tf.random.normal((20, 12)))
    opt = keras.optimizers.Adam(learning_rate=1e-3)
    users = tf.random.normal((20, 16))
    with tf.GradientTape() as tape:
        u = l2_normalize(user_tower(users, training=True))
        logits = tf.matmul(u, items, transpose_b=True) * 5.0
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(tf.range(20), logits))
    variables = user_tower.trainable_variables + [items]
    opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return float(loss)
