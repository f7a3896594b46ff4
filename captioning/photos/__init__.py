"""Photos in: the image loader and preprocessing, the JPEG step, the photo and domain checks, webdataset shards,
folders and lists of images, the stream ``caption`` reads. Imports no other room."""
