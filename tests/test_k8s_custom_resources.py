"""Resources servefit has no layout for (sgl-project/rbg's RoleBasedGroup, KubeRay's RayService):
the pod templates they nest are read like any other pod, and a leader-worker group's other pods
add their GPUs to the leader's."""

from __future__ import annotations

from pathlib import Path

from servefit.linter import lint_paths
from servefit.sources import scan_file

FIX = Path(__file__).parent / "fixtures" / "sources" / "k8s"


def argv(site) -> list[str]:
    return [t.text for t in site.argv]


def test_role_based_group_v1alpha2_roles_are_servers():
    prefill, decode = scan_file(str(FIX / "rbg_v1alpha2.yaml")).sites
    assert prefill.name == "RoleBasedGroup/sglang-pd-inference/prefill/sglang"
    assert argv(prefill)[3:5] == ["--model-path", "Qwen/Qwen3-0.6B"]
    assert (prefill.argv[4].span.line, prefill.gpu.count) == (20, 1)
    assert decode.name == "RoleBasedGroup/sglang-pd-inference/decode/sglang"
    assert argv(decode)[4] == "Qwen/Qwen3-32B" and decode.argv[4].span.line == 35
    # leaderWorkerPattern size 2: the worker pod's GPU joins the leader's
    assert decode.gpu.count == 2
    assert decode.gpu.source.endswith("+ 1 worker pod(s) × 1 (leader-worker size 2)")


def test_role_based_group_v1alpha1_leader_worker_set_size():
    [site] = scan_file(str(FIX / "rbg_v1alpha1.yaml")).sites
    assert site.name == "RoleBasedGroup/vllm-multi-node/inference/vllm"
    assert argv(site)[-4:] == ["--tensor-parallel-size", "8", "--pipeline-parallel-size", "3"]
    assert site.gpu.count == 24


def test_ray_service_worker_group_and_a_resource_without_pods():
    [site] = scan_file(str(FIX / "rayservice.yaml")).sites  # the ray head runs no engine; Widget has no pod
    assert site.name == "RayService/llama-serve/gpu-group/llm"
    assert argv(site) == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]
    assert site.gpu.count == 1


def test_one_gpu_per_pod_needs_no_shared_memory_but_one_pod_with_two_does(tmp_path):
    """NCCL ranks in different pods meet over the network: no SF102 for a group of one-GPU pods;
    the same group with two GPUs in a pod and no /dev/shm volume gets it."""
    report = lint_paths([str(FIX / "rbg_v1alpha2.yaml")])
    assert [f.code for f in report.findings if f.code.startswith("SF10")] == []
    two = tmp_path / "rbg.yaml"
    two.write_text((FIX / "rbg_v1alpha2.yaml").read_text().replace('"--tp", "2"', '"--tp", "4"')
                   .replace('nvidia.com/gpu: "1"\n', 'nvidia.com/gpu: "2"\n'))
    found = [(f.code, f.span.line) for f in lint_paths([str(two)]).findings if f.code.startswith("SF10")]
    assert found == [("SF102", 35)]


def test_a_dynamo_graph_deployments_main_container_is_read():
    """DynamoGraphDeployment keeps its container under `extraPodSpec.mainContainer`, named by its
    service; its Dynamo vLLM worker is vLLM's server (tests/test_launchers_dynamo.py)."""
    [site] = scan_file(str(FIX / "dynamo_graph.yaml")).sites
    assert (site.name, site.engine, site.image) == ("DynamoGraphDeployment/vllm-agg/VllmDecodeWorker/container", "vllm",
                                                    "vllm/vllm-openai:v0.11.0")
    assert [t.text for t in site.argv] == ["python3", "-m", "dynamo.vllm", "--model", "Qwen/Qwen3-0.6B",
                                           "--max-model-len", "8192"]
    assert [f.code for f in lint_paths([str(FIX / "dynamo_graph.yaml")]).findings if f.code == "SF116"] == []
    # a resource whose pods were read gets no SF116 for the same image
    assert [f.code for f in lint_paths([str(FIX / "rayservice.yaml")]).findings if f.code == "SF116"] == []


def test_role_templates_are_merged_with_each_roles_patch(tmp_path):
    """RBG's roleTemplates are not pods; a role's templateRef is the template with its patch laid
    over it (containers matched by name): the image from the template, the command from the patch.
    A role that runs another program from the engine's image (a Mooncake master) is no server and
    gets no finding; Dynamo's SGLang worker (dynamo.sglang) is SGLang's server."""
    f = tmp_path / "rbg.yaml"
    f.write_text("""apiVersion: workloads.x-k8s.io/v1alpha2
kind: RoleBasedGroup
metadata:
  name: pd
spec:
  roleTemplates:
    - name: base
      template:
        spec:
          containers:
            - name: sglang
              image: lmsysorg/sglang:v0.5.5
              env:
                - name: A
                  value: "1"
  roles:
    - name: master
      standalonePattern:
        templateRef:
          name: base
          patch:
            spec:
              containers:
                - name: sglang
                  command: [mooncake_master, --rpc_port, "50051"]
    - name: prefill
      standalonePattern:
        templateRef:
          name: base
          patch:
            spec:
              containers:
                - name: sglang
                  command: [python3, -m, sglang.launch_server, --model-path, Qwen/Qwen3-8B, --tp, "2"]
                  resources:
                    limits:
                      nvidia.com/gpu: "2"
""")
    [site] = scan_file(str(f)).sites
    assert site.name == "RoleBasedGroup/pd/prefill/sglang"
    assert [t.text for t in site.argv][4] == "Qwen/Qwen3-8B" and (site.argv[4].span.line, site.argv[4].span.col) == (34, 78)
    assert site.gpu.count == 2 and site.env["A"].text == "1"  # the template's env is kept
    assert [f.code for f in lint_paths([str(f)]).findings if f.code in ("SF116", "SGL002", "SGL001")] == []
    f.write_text(f.read_text().replace("sglang.launch_server", "dynamo.sglang"))  # Dynamo's SGLang worker
    [site] = scan_file(str(f)).sites
    assert site.engine == "sglang" and [x.code for x in lint_paths([str(f)]).findings if x.code == "SF116"] == []


def test_a_leader_worker_sets_worker_counts_the_whole_group():
    """The worker pod of a two-pod LeaderWorkerSet runs the same server: its TP 2 spans the leader's
    GPU and its own, so no SF101."""
    report = lint_paths([str(FIX / "lws_one_gpu_pods.yaml")])
    assert [f.code for f in report.findings if f.code in ("SF101", "SF102")] == []
    leader, worker = scan_file(str(FIX / "lws_one_gpu_pods.yaml")).sites
    assert (leader.gpu.count, worker.gpu.count) == (2, 2)
    assert worker.gpu.source.endswith("+ the leader pod × 1 (LeaderWorkerSet size 2)")


RAY = """apiVersion: ray.io/v1
kind: RayCluster
metadata:
  name: vllm
{annotations}spec:
  headGroupSpec:
    template:
      spec:
        containers:
        - name: ray-head
          image: vllm/vllm-openai:v0.11.0
  workerGroupSpecs:
  - groupName: gpu
    template:
      spec:
        containers:
        - name: ray-worker
          image: vllm/vllm-openai:v0.11.0
        - name: sidecar
          image: vllm/vllm-openai:v0.11.0
          command: [vllm, serve, Qwen/Qwen3-8B]
"""


def test_kuberay_runs_ray_start_in_a_ray_container_without_a_command(tmp_path):
    """KubeRay gives the first container of each group `ray start`: no vLLM server there (said, not skipped);
    a sidecar's own command is one; with ray.io/overwrite-container-cmd "true" the image's command runs."""
    f = tmp_path / "ray.yaml"
    f.write_text(RAY.format(annotations=""))
    r = scan_file(str(f))
    assert [(s.name, argv(s)) for s in r.sites] == [("RayCluster/vllm/gpu/sidecar", ["vllm", "serve", "Qwen/Qwen3-8B"])]
    f.write_text(RAY.format(annotations="").replace("          command: [vllm, serve, Qwen/Qwen3-8B]\n", ""))
    assert [s.name for s in scan_file(str(f)).sites] == ["RayCluster/vllm/gpu/sidecar"]  # not KubeRay's: the image's
    f.write_text(RAY.format(annotations="").split("        - name: sidecar")[0])
    r = scan_file(str(f))
    assert r.sites == [] and [(x.code, x.span.line, x.span.col) for x in r.findings] == [
        ("SF116", 11, 18), ("SF116", 18, 18)]
    assert r.findings[1].message == (
        "vllm/vllm-openai:v0.11.0 runs vLLM, but KubeRay starts Ray in this container (`ray start`), so a server it "
        "runs comes from a Ray Serve application or a job servefit does not read, and its settings were not checked")
    f.write_text(RAY.format(annotations='  annotations:\n    ray.io/overwrite-container-cmd: "true"\n'))
    assert [s.name for s in scan_file(str(f)).sites] == [
        "RayCluster/vllm/ray-head", "RayCluster/vllm/gpu/ray-worker", "RayCluster/vllm/gpu/sidecar"]
