"""What tile and layout files share: 140 node feature columns and uint8 opcode ids
(all 256 in the vocabulary, so a model's shapes never depend on the data)."""

NODE_FEAT_DIM = 140
OPCODE_VOCAB_SIZE = 256


class NodeRows:
    """Mixin of a graph whose `node_feat` holds one row per node."""

    @property
    def num_nodes(self) -> int:
        return int(self.node_feat.shape[0])
