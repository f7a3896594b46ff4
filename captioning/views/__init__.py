"""What a person sees: the attention overlay PNGs and their layout, the ``caption --html`` page, captions that draw
themselves in Jupyter. May import photos."""
