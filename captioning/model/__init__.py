"""The networks and the inference object: the image encoder (and its inference and ONNX forms), the decoder (and its
fast path), CaptionModel, the Captioner, the bundled model files. May import views and photos."""
