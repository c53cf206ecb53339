"""The expert skill library (long-term memory): one TOML file per skill, gated by rules over the
task's features and the node's profile, ranked by how specifically they match and by recorded outcomes.

``schema`` reads and checks a skill file; ``book`` holds the loaded library, gates and ranks it;
``stats`` keeps outcome statistics in the user store.
"""
from ..paths import user_home
from .book import SkillBook
from .schema import (CATEGORIES, EXAMPLE_LANGS, Skill, arch_allows, check_dir, load_skill_file, parse_arch,
                     parse_skill, shipped_dir)
from .stats import OUTCOMES, SkillStats, StatsStore

__all__ = [
    "CATEGORIES", "EXAMPLE_LANGS", "OUTCOMES", "Skill", "SkillBook", "SkillStats", "StatsStore",
    "arch_allows", "check_dir", "load_skill_file", "parse_arch", "parse_skill", "shipped_dir",
    "user_home",
]
