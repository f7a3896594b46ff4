"""What training reads and minimises: the LightningModule, the objective, the data module, the corpus readers, the
chunk streaming, the feature cache, attention targets, shape scenes and grounding. May import model, views, photos."""
