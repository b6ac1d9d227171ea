"""Lesson 10, step 3: how mixed precision moves the largest batch that fits on the GPU.

    torchrun --nproc-per-node 1 batch_memory.py

A training step's peak memory is a straight line in the batch: fixed bytes (weights, gradients,
optimizer state) plus bytes per sample (the activations autograd keeps for backward, and the input).
Two small batches measure the line; the line predicts the largest batch; one step just under the
prediction confirms it. Under bf16 autocast most activations are stored in 2 bytes instead of 4,
so the bytes per sample fall and the batch that fits grows, while the fixed part (fp32 weights,
fp32 gradients, fp32 momentum) stays the same.
"""
import gc
import json

import torch
import torch.nn.functional as F
import torchvision


def report(**fields):
    print("REPORT " + json.dumps(fields), flush=True)


def peak_of_step(model, optimizer, batch, dtype, size=224):
    """Peak bytes the caching allocator reserved for two training steps at this batch."""
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(2):  # the second step holds weights, gradients, momentum and activations at once
        images = torch.randn(batch, 3, size, size, device="cuda").contiguous(memory_format=torch.channels_last)
        labels = torch.randint(0, 10, (batch,), device="cuda")
        with torch.autocast("cuda", dtype=dtype, enabled=dtype is not None):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_reserved()


def largest_batch(dtype):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).cuda().to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    small, large = 32, 128
    p_small, p_large = peak_of_step(model, optimizer, small, dtype), peak_of_step(model, optimizer, large, dtype)
    per_sample = (p_large - p_small) / (large - small)
    fixed = p_small - per_sample * small
    free, _total = torch.cuda.mem_get_info()
    usable = free + torch.cuda.memory_reserved()
    predicted = int((usable - fixed) // per_sample)
    confirm = int(predicted * 0.9)  # just under the prediction: the allocator rounds and fragments
    try:
        peak_of_step(model, optimizer, confirm, dtype)
        fits = True
    except torch.OutOfMemoryError:
        fits = False
    del model, optimizer
    gc.collect()
    torch.cuda.empty_cache()
    return {"per_sample_mib": round(per_sample / 2**20, 2), "fixed_mib": round(fixed / 2**20, 1),
            "predicted": predicted, "confirmed": confirm if fits else 0}


def main():
    if not torch.cuda.is_available():
        raise SystemExit("this step measures GPU memory: it needs an NVIDIA GPU")
    # cuDNN's autotuner would time every convolution again at each new batch, and its workspace tries
    # would fill the allocator's peak: the heuristic choice keeps each measurement to the step itself
    torch.backends.cudnn.benchmark = False
    fp32, bf16 = largest_batch(None), largest_batch(torch.bfloat16)
    gain = bf16["predicted"] / fp32["predicted"]
    print(f"fp32: {fp32['per_sample_mib']} MiB per sample, {fp32['fixed_mib']} MiB fixed, largest batch ~{fp32['predicted']}")
    print(f"bf16: {bf16['per_sample_mib']} MiB per sample, {bf16['fixed_mib']} MiB fixed, largest batch ~{bf16['predicted']}")
    print(f"bf16 autocast fits {gain:.2f}x the batch: activations are kept in 2 bytes, weights stay fp32")
    report(fp32_per_sample_mib=fp32["per_sample_mib"], bf16_per_sample_mib=bf16["per_sample_mib"],
           fp32_max_batch=fp32["predicted"], bf16_max_batch=bf16["predicted"], bf16_batch_gain=round(gain, 3),
           both_confirmed=bool(fp32["confirmed"] and bf16["confirmed"]),
           fixed_same=abs(fp32["fixed_mib"] - bf16["fixed_mib"]) < max(256.0, 0.5 * fp32["fixed_mib"]))


if __name__ == "__main__":
    main()
