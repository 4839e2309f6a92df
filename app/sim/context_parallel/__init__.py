"""Long context (chapter 9): attention split along the sequence over ``cp`` ranks.

Ring Attention (Liu et al. 2023; Megatron-LM ``cp_comm_type`` p2p), an all-gather of K/V (Llama
3's long-context stage), DeepSpeed-Ulysses' all-to-alls (Jacobs et al. 2023; Megatron a2a) and
the hierarchical mix of the two (Megatron a2a+p2p), computed on real seeded numbers, together
with what they cost at the scale of a real model: the s² wall, the α–β time of a layer, the
condition under which Ring Attention hides its transfers, and the memory of a rank.

    params.py     ContextParallelParams, the scene's query (one name, one range a field)
    inputs.py     make_inputs: the seeded Q, K, V (the worker imports the same numbers)
    layout.py     which tokens a rank holds (contiguous or zigzag), the a2a / ring groups
    attention.py  plain reference attention and the online-softmax merge
    methods.py    the four methods on stacked per-rank arrays, step by step
    captions.py   the frames: what happens in each step, in words and numbers
    volumes.py    elements sent per rank (the formulas the transfers must add up to)
    wall.py       attention's O(s²) against a GPU: scores, statistics, FLOPs, activations
    cost.py       α–β time of a layer, the overlap crossover, the sweep over cp
    memory.py     memory of a rank as cp grows; the cp a context needs
    simulate.py   simulate(params) → ContextParallelTrace (the JSON of /api/context-parallel)
"""
