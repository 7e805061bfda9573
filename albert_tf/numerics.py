"""The original ALBERT's numeric conventions, declared once: the LayerNorm epsilon and
the activation names. No TensorFlow, no Keras: `config.py` validates `hidden_act`
with these names, `activations.py` implements them, the layers read the epsilon.
"""

# Epsilon 1e-12 to match the original checkpoints (the original modeling.py's
# layer_norm; Hugging Face's layer_norm_eps). Every LayerNorm of every model uses it.
LAYER_NORM_EPSILON = 1e-12

# What a masked-out position adds to a logit (the original modeling.py's attention mask,
# and its span logits over padding): large enough to vanish in a softmax, small enough
# to stay finite in float16.
MASKED_LOGIT = -10000.0

# `hidden_act` name -> the function it means (`albert_tf.activations` implements each).
# "gelu" means what it means in the original ALBERT code: the tanh approximation.
# Hugging Face calls that "gelu_new" and uses "gelu" for the exact erf form, which we
# call "gelu_exact"; HF configs are translated on load (`config.HF_ACTIVATIONS`).
ACTIVATIONS = {
    "gelu": "gelu_tanh",
    "gelu_new": "gelu_tanh",
    "gelu_exact": "gelu_erf",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
    "tanh": "tanh",
    "linear": "linear",
}
