"""LiteRT (TensorFlow Lite) export: one .tflite file per checkpoint, raw text in.

  spm_model.py  the SentencePiece model the file carries: ALBERT's normalisation
                composed into SentencePiece's own character map (no TensorFlow)
"""
