"""Classic control in pure torch (``sim=torch``): pendulum, cart-pole, point mass, a bimodal bandit, each
a ``TorchVecEnv`` of ``ctrl_rl.sims.torch_backend`` ending in its ``register_torch_task``; their 2-D
drawings for ``play --video`` (``draw.py``) and their tuned settings (``tune/``)."""
