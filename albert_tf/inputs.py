"""The model's input names: one definition, imported by the models, the tokenizers,
the serving graph and the fine-tuning pipelines. No TensorFlow, no Keras.

Every model takes a dict with these int32 [B, T] entries (multiple choice: [B, K, T]):
  input_word_ids   token ids: [CLS] A [SEP] (B [SEP]) then padding
  input_mask       1 for real tokens, 0 for padding
  input_type_ids   0 for [CLS], A and its [SEP]; 1 for B and its [SEP]
"""

INPUT_WORD_IDS = "input_word_ids"
INPUT_MASK = "input_mask"
INPUT_TYPE_IDS = "input_type_ids"
INPUT_NAMES = (INPUT_WORD_IDS, INPUT_MASK, INPUT_TYPE_IDS)
# Hugging Face's names for the same three (a tokenizer called with names="hf").
HF_INPUT_NAMES = {INPUT_WORD_IDS: "input_ids", INPUT_MASK: "attention_mask",
                  INPUT_TYPE_IDS: "token_type_ids"}
# The masked-LM heads' extra input: int32 [B, P], the positions to predict.
MASKED_LM_POSITIONS = "masked_lm_positions"
