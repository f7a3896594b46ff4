"""captioning: Show-Attend-Tell image captioning on the shared text_attn library."""
