"""Empirical robustness: exhaustive enumeration (EX Acc), HotFlip (HF Acc, of sequences and trees) and
random members of S(x)."""

from arc_jax.attacks.augmentation import augment_batch, sample_member, sample_tree_member
from arc_jax.attacks.exhaustive import (AuditFailure, ExhaustiveResult, exhaustive_robustness,
                                       exhaustive_tree_robustness)
from arc_jax.attacks.hotflip import HotFlipCandidate, HotFlipResult, Pick, adversarial_examples, hotflip_candidates, hotflip_robustness, hotflip_search
from arc_jax.attacks.journal import Journal
from arc_jax.attacks.tree_hotflip import (TreeHotFlipCandidate, tree_adversarial_examples,
                                          tree_hotflip_robustness, tree_hotflip_search)
