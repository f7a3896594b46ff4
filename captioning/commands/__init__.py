"""The console commands (caption, its per-batch work and its loops, caption-train, caption-export): parse, choose the
loop, report. May import every room below: training, model, views, photos."""
