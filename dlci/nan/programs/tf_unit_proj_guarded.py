"""The projection head of tf_unit_proj normalised with tf.math.l2_normalize (eps-floored squared norm)."""
import keras
import tensorflow as tf


def to_unit(h):
    return tf.math.l2_normalize(h, axis=1)


def train():
    head = keras.Sequential([keras.Input(shape=(9,)), keras.layers.Dense(6)])
    prototypes = tf.Variable(tf.random.normal((4, 6)))
    opt = keras.optimizers.SGD(learning_rate=0.1)
    x = tf.random.normal((20, 9))
    y = tf.random.uniform((20,), maxval=4, dtype=tf.int32)
    with tf.GradientTape() as tape:
        logits = 8.0 * tf.matmul(to_unit(head(x, training=True)), tf.math.l2_normalize(prototypes, axis=1),
                                 transpose_b=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
    variables = head.trainable_variables + [prototypes]
    opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return float(loss)
