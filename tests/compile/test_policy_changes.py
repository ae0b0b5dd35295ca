"""``Policy.with_``: a copy with fields changed, the same copy for the same changes, every change
validated as a fresh policy is."""

from __future__ import annotations

import pytest

from contextwindow.compile import Policy
from contextwindow.errors import InvalidInput


class TestPolicyChanges:
    def test_the_same_changes_give_the_same_copy(self) -> None:
        base = Policy()
        changed = base.with_(output_reserve=512, reread_tool=False)
        assert changed is base.with_(output_reserve=512, reread_tool=False)
        assert (changed.output_reserve, changed.reread_tool) == (512, False)
        assert base.output_reserve is None and base.reread_tool is True

    def test_an_equal_policy_gets_an_equal_copy(self) -> None:
        assert Policy().with_(output_reserve=9) == Policy().with_(output_reserve=9)

    def test_a_value_equal_to_a_remembered_one_but_of_another_type_is_validated_afresh(self) -> None:
        base = Policy()
        assert base.with_(output_reserve=1).output_reserve == 1
        with pytest.raises(InvalidInput):
            base.with_(output_reserve=True)  # True == 1, yet no count

    def test_a_bad_change_is_refused_every_time(self) -> None:
        for _ in range(2):
            with pytest.raises(InvalidInput):
                Policy().with_(max_inline_images=-1)

    def test_an_unhashable_change_is_validated_as_it_always_was(self) -> None:
        with pytest.raises(InvalidInput):
            Policy().with_(manifest_max_entries=[1])

    def test_an_unknown_field_is_a_type_error(self) -> None:
        with pytest.raises(TypeError):
            Policy().with_(no_such_field=1)
