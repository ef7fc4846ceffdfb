"""A tiny random-weight Llama from transformers (built from a config: nothing is downloaded).

`trnlens profile samples/tiny_llama.py::logits` profiles one forward. transformers'
`LlamaRMSNorm` is a hand-written RMSNorm (8 dispatches a call, 5 calls a forward): the run finds
it in the library's code and reports it on the line below that calls the model;
`trnlens compare --fix samples/tiny_llama.py::logits` measures the model with that module's
forward swapped for `torch.rms_norm` (the library's files untouched).
"""

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def build_model(dtype=torch.float32):
    torch.manual_seed(0)
    config = LlamaConfig(
        hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, vocab_size=1000, max_position_embeddings=256,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    return model.to(dtype).eval()


def llama_inputs():
    return (build_model(), torch.randint(0, 1000, (1, 128))), {}


def llama_inputs_bf16():
    return (build_model(torch.bfloat16), torch.randint(0, 1000, (1, 128))), {}


# trnlens: inputs=llama_inputs
def logits(model, input_ids):
    return model(input_ids).logits
