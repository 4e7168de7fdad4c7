// Package gpt2 is GPT-2 (Radford et al. 2019) as a reusable goddp model:
// the architecture of OpenAI's release, HF's GPT2LMHeadModel and nanoGPT,
// of any size by a Config, with Hugging Face's parameter names and
// layouts, llm.c's model file, and sampling.
//
// # The model
//
// New(rng, cfg) builds token embeddings wte [PaddedVocab, C] and learned
// positions wpe [BlockSize, C], their sum through dropout, Layers
// pre-LayerNorm blocks
//
//	x = x + attn(ln_1(x))   causal self-attention, heads of C/Heads, dropout on
//	                        the probabilities and after c_proj
//	x = x + mlp(ln_2(x))    c_fc [C, 4C], GELU's tanh approximation, c_proj, dropout
//
// a final LayerNorm ln_f (eps 1e-5) and the head: the hidden states times
// wteᵀ, the same Variable as the embedding (weight tying), so its
// gradient is the sum of both uses. The initialisation is GPT-2's: weights
// and embeddings from N(0, 0.02²), the two residual projections of each
// block (attn.c_proj, mlp.c_proj) from N(0, (0.02/√(2·Layers))²), biases
// zero, LayerNorms one. Config124M, Config350M, Config774M and
// Config1558M are the released sizes (124,439,808 parameters for the
// first; Config.NumParams computes it), Config.Padded(128) pads the
// vocabulary 50257 → 50304 as nanoGPT and llm.c do.
//
// Forward takes token ids [B, T] (an int64 tensor, as data's token
// shards give them) and returns logits [B, T, PaddedVocab]; Loss is the
// mean cross-entropy against targets [B, T], ignoring IgnoreIndex (-1,
// nanoGPT's). As in nanoGPT the padded columns are ordinary logits in
// the loss (llm.c masks them instead): no target is one of them, so
// training drives them down, and Generate never picks them. Generate
// extends a prompt greedily (Temperature 0) or by top-k sampling with a
// temperature from a seeded generator.
//
// # Names and layouts: Conv1D weights stored [in, out]
//
// The state dict is GPT2LMHeadModel's: transformer.wte.weight,
// transformer.h.0.attn.c_attn.weight, ..., transformer.ln_f.bias, with
// HF's Conv1D weights [in, out] (the transpose of nn.Linear's [out, in]).
// The model stores them that way: each Conv1D's parameter is the [in,
// out] tensor, so nn.StateDict(model), the trainer's checkpoints (which
// are nn.StateDict), the optimizer's state and DDP's buckets are all in
// HF's layout with no conversion anywhere, and LoadStateDict of an HF
// file is a plain copy. On the host the product reads the weight in that
// layout, as torch's addmm(b, x, W): the forward is one GEMM on rows that
// start as the bias, the backward's GEMMs take the transposes by their
// flags (dx = gy·Wᵀ, dW = xᵀ·gy added straight into the weight's Grad), so
// no transposed copy of a weight or of its gradient exists (at 124M one
// was 340 MB alive through each step and another 340 MB of garbage after
// it, until 2026-11-29). bf16 products (amp.Autocast) and devices hand a
// transposed copy (transposed, whose backward transposes the gradient
// back) to autograd.LinearWith, for its bf16 and device kernels. The
// alternative, nn.Linear inside and a transpose at the state-dict
// boundary, would need a state-dict hook in nn and would leave the
// trainer's checkpoints and optimizer state in the other layout.
//
// The head has no parameter of its own, so there is no lm_head.weight
// key: HF's save_pretrained writes none either (it drops a tied weight's
// second name), and LoadHF accepts a file with one only when it equals
// wte. HF's vocabulary is unpadded: HFStateDict and SaveHF cut wte to
// VocabSize rows and LoadHF pads it with zero rows, while nn.StateDict
// (and so a trainer checkpoint) keeps all PaddedVocab rows. LoadHF also
// takes the hub's GPT2Model names (no "transformer." prefix) and skips
// the causal-mask buffers (attn.bias, attn.masked_bias) older HF
// versions saved.
//
// # Memory
//
// A training step that ends with autograd's BackwardAndFree(loss) (the
// graph freed as the backward pass goes) holds, besides the parameters,
// their gradients and the optimizer's state, the forward's activations
// and little more: each op's gradient goes back to the host cache once
// the next op has read it, each activation once the backward that reads
// it last has run, the loss writes the logits' gradient over the softmax
// it saved and GELUTanh its gradient over its saved derivative. Forward
// then Loss hold two [B·T, PaddedVocab] tensors at the end of the
// forward (the logits and the softmax); ForwardLoss holds one. One step
// of 124M at T=1024, batch 2, world 1 (TestStepPeakRSS, on 2026-11-29):
// peak RSS 8.40 GB with Backward then FreeGraph before these changes,
// 6.07 GB with BackwardAndFree, 5.65 GB with ForwardLoss too, and 4.45 GB
// with the fused causal attention besides (611acfc).
//
// # llm.c's model file
//
// WriteLLMC/SaveLLMC and ReadLLMC/LoadLLMC/FromLLMC read and write
// gpt2_124M.bin: a 256-int32 header (magic 20240326, version 3 for
// float32 or 5 for bfloat16, then max_seq_len, vocab_size, num_layers,
// num_heads, channels, padded_vocab_size) and the 16 tensors in llm.c's
// order, each stacked over the layers, the four matrices in torch's
// Linear layout (so transposed here), wte with its padded rows. A
// written file read back and written again is the same bytes in both
// versions. Errors name the file and what is wrong (magic, version,
// sizes, truncation).
//
// # Precision and devices
//
// amp.Autocast lowers every Conv1D and the head (Model.SetPrecision) to
// bf16 products. GELU's tanh form is its own op (GELUTanh, which is
// autograd.GELUTanh, the op table's GELUTanh entries on every device;
// autograd.GELU is the erf form torch defaults to, which GPT-2 does not
// use), so the fused LinearGELULinear of examples/gpt does not apply. The
// attention dropout's unfused path uses autograd.MatMul, which is
// host-only: train on a device with Dropout 0 (the presets'). The
// torch fixture (scripts/gen_fixtures_gpt2.py, testdata/tiny.*: a plain
// torch GPT-2 with HF's names and layout, its weights as a safetensors
// file and as an llm.c model file) checks the logits, the loss and
// gradients of a tiny config within 1e-5 relative, on the host and on
// the simulated device.
package gpt2
