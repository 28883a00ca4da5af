"""Learned placement: a policy trained by REINFORCE on the MDP estimated by a cost model
(AutoShard/DreamShard).

``env`` the estimated MDP, ``policy`` the network and its checkpoint, ``train`` the trainer, ``planner`` the
``--algo rl`` planner. Import the submodules directly (they import torch).
"""
