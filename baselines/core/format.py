"""What the tile and layout files of TpuGraphs share: the op nodes' featurization.

Both collections describe ops with the same 140 node feature columns and
opcode ids (uint8, below 128 in the release; the vocabulary here is every
uint8 value, so a model's shapes never depend on the data).
"""

NODE_FEAT_DIM = 140
OPCODE_VOCAB_SIZE = 256
