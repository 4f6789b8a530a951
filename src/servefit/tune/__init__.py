"""servefit tune: search an engine's knobs with its own memory model and patch the files.

space.py (knobs -> dimensions, valid values only; adapters.py for llama.cpp, Ollama, TGI,
SGLang; variants.py for weight choices), objective.py (needs, scores, the quality order, the
ranking and the Pareto front), study.py (the optuna study: exhaustive where the space is small,
BruteForce / TPE / NSGA-II otherwise), trials.py (results as optuna trials and back; optuna is
imported by these two only), bench.py (measured mode), patch.py + patch_env.py + patch_yaml.py + style.py (edits on the sources' spans in each file's own style), diff.py (unified
diffs with credentials masked), write.py (atomic writes), session.py (one CLI invocation).
"""
