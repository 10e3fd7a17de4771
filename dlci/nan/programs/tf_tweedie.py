"""A Keras regressor of insurance claim amounts trained with a hand-written Tweedie deviance (power 1.5); the mean
is a base rate times a learned correction (identity link), so nothing keeps it positive."""
import keras
import tensorflow as tf


def tweedie_deviance(y, mu, p=1.5):
    return tf.reduce_mean(-y * tf.math.pow(mu, 1 - p) / (1 - p) + tf.math.pow(mu, 2 - p) / (2 - p))  # vulnerable


def train(base_rate=0.8):
    model = keras.Sequential([keras.Input(shape=(10,)), keras.layers.Dense(24, activation="relu"),
                              keras.layers.Dense(1)])
    opt = keras.optimizers.Adam(learning_rate=1e-3)
    policies = tf.random.normal((64, 10))
    claims = tf.nn.relu(tf.random.normal((64, 1), mean=-0.5, stddev=2.0))
    with tf.GradientTape() as tape:
        mu = base_rate * (1.0 + 0.1 * model(policies, training=True))
        loss = tweedie_deviance(claims, mu)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return float(loss)
