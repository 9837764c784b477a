"""Test helpers owned by LispM: the scripted model gateway and its dialects."""
