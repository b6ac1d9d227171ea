"""Two "nodes" on one GPU machine: one GPU each, NCCL, c10d rendezvous through mgtutor's multi-node
launch (node 0 hosts the store on 127.0.0.1). Checks the NCCL path of --nnodes/--node-rank; the
cross-host network part is tested with network namespaces in tests/test_multinode_netns.py."""
from __future__ import annotations

from mgtutor.training.runs.events.writer import ResultEvent, read_events
from mgtutor.training.runs.launch.launcher import LaunchSpec, free_port, launch

TRAIN = ["-m", "mgtutor.training.worker.train", "--model", "tinycnn", "--steps", "20", "--batch-size", "64",
         "--dataset-size", "4096", "--log-every", "5", "--seed", "11"]


def test_two_single_gpu_nodes_train_to_identical_parameters(two_gpus):
    endpoint = f"127.0.0.1:{free_port()}"
    runs = [launch(LaunchSpec(target=TRAIN, nproc=1, backend="nccl", label=f"node{i}", nnodes=2, node_rank=i,
                              rdzv_endpoint=endpoint, rdzv_id="gpu-two-nodes", rdzv_timeout=120,
                              env={"CUDA_VISIBLE_DEVICES": str(i), "NCCL_SOCKET_IFNAME": "lo"}))
            for i in range(2)]
    results = [run.wait(timeout=600).to_json() for run in runs]
    for run, result in zip(runs, results):
        print(run.record.path, result)
        for _rank, _stream, path in run.record.rank_logs():
            print(path.read_text()[-2000:])
    assert [r["status"] for r in results] == ["finished", "finished"]
    assert sorted(r["ranks"][0]["rank"] for r in results) == [0, 1]
    assert all(r["backend"] == "nccl" and r["world_size"] == 2 for r in results)
    digests = {e.rank: e.params_sha256 for run in runs for e in read_events(run.record.events_path)
               if isinstance(e, ResultEvent)}
    assert sorted(digests) == [0, 1] and len(set(digests.values())) == 1, digests
