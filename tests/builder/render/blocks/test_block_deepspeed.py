"""The deepspeed block alone, on targets of the test's own (tests/helpers/mini_target.py)."""

from helpers.mini_target import cuda_changes, mini_target, rocm_changes

from builder.render.blocks import deepspeed


def test_a_cpu_image_compiles_exactly_its_promised_ops_into_a_kept_wheel(tree):
    target = mini_target(tree)
    build, final = deepspeed.parts(target)
    env = dict(build.build_env)
    assert [(p.block, p.stage, p.packages) for p in (build, final)] == [
        ("deepspeed", "build", ()),
        ("deepspeed", "final", ()),
    ]
    assert (env["DS_ACCELERATOR"], env["DS_BUILD_OPS"]) == ("cpu", "1")
    assert set(target.deepspeed.switches) <= set(build.build_env)  # one switch per listed op
    assert build.kept.name == "deepspeed-wheel"
    assert f"deepspeed=={target.deepspeed.version}" in " ".join(build.kept.build)
    assert 'pip install --no-cache-dir "$ds_tmp"/wheel/deepspeed-*.whl' in build.post
    assert final.env == (("DS_ACCELERATOR", "cpu"),)  # DeepSpeed would look for a GPU otherwise


def test_the_master_address_fix_is_applied_and_tested_unless_the_recipe_turns_it_off(tree):
    build, final = deepspeed.parts(mini_target(tree))
    assert any("s/hostname -I/hostname -s/g" in line for line in build.post)
    assert any("DeepSpeed still uses hostname -I" in line for line in final.test)
    build, final = deepspeed.parts(mini_target(tree, {"deepspeed": {"fix_master_address": False}}))
    assert not any("hostname" in line for line in (*build.post, *final.test))


def test_a_cuda_image_links_async_io_against_a_driver_stub_and_names_what_is_not_prebuilt(tree):
    build, final = deepspeed.parts(mini_target(tree, cuda_changes(), sites=("mahti",)))
    assert dict(build.build_env)["DS_ACCELERATOR"] == "cuda" and final.env == ()
    assert any("-soname,libcuda.so.1" in line for line in build.kept.build)
    assert any(note.startswith("Not prebuilt: ") and "evoformer_attn" in note for note in final.help)
    # the ops' own packages (libaio) go in this layer: a top-layer block asks the os block for none
    assert any(line.startswith("apt-get install") for line in final.post) and final.packages == ()


def test_a_rocm_image_compiles_for_its_sites_arch_and_wavefront_and_tests_the_record(tree):
    build, final = deepspeed.parts(mini_target(tree, rocm_changes(), sites=("lumi",)))
    compile_lines = "\n".join(build.kept.build)
    assert "Name:                    gfx90a" in compile_lines  # the rocminfo stand-in
    assert "Wavefront Size:          64(0x40)" in compile_lines
    assert "rocm-build.json" in build.kept.save[0]
    assert final.test[0] == (
        "python -m smoke.netcheck wavefront --record /opt/venv/share/hpc-ml-runtime/rocm-build.json "
        "--arch gfx90a --expected 64"
    )


def test_a_cuda_images_deepspeed_step_asks_for_what_its_cuda_built_wheel_requires(tree):
    """DeepSpeed's setup.py adds nvidia-ml-py to the wheel's requirements when it builds against
    a CUDA torch; the lock, resolved from the sdist without torch, missed it, and the first
    locked a100-cuda build stopped at `pip check` (2026-11-28). CPU and ROCm wheels do not ask."""
    from conftest import ROOT

    for name in ("a100-cuda", "h100-cuda", "gh200-cuda", "v100-cuda", "csc-cuda"):
        lock = (ROOT / "recipes" / "locks" / name / "python.txt").read_text()
        assert "# step deepspeed: deepspeed==0.19.8 nvidia-ml-py --no-binary=deepspeed" in lock, name
        assert "\nnvidia-ml-py==" in lock.split("# step deepspeed")[1].split("# step frameworks")[0], name
        assert "\nnvidia-ml-py==" in (ROOT / "containers" / f"{name}.def").read_text(), name
    assert "nvidia-ml-py" not in (ROOT / "recipes" / "locks" / "cpu" / "python.txt").read_text()
    assert "nvidia-ml-py" not in (ROOT / "containers" / "lumi-rocm.def").read_text()
