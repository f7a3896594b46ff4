"""What training reads and minimises: the LightningModule, the objective, the data module, the corpus readers, the
chunk streaming, the feature cache, attention targets, shape scenes, grounding and the options a config leaves
unread. May import model, views, photos."""
