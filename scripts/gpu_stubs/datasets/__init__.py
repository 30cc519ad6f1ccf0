"""A stand-in for Hugging Face `datasets` on a GPU machine that lacks it (no internet to install it).
Only what rlnb's tasks use: Dataset.from_list, len, a row by int, columns by a list of indices."""


class Dataset(list):
    @classmethod
    def from_list(cls, rows):
        return cls(rows)

    def __getitem__(self, key):
        if isinstance(key, (int, slice)):
            return list.__getitem__(self, key)
        rows = [list.__getitem__(self, int(i)) for i in key]
        return {name: [r[name] for r in rows] for name in (rows[0] if rows else {})}

    def select(self, indices):
        return Dataset(list.__getitem__(self, int(i)) for i in indices)


class IterableDataset:
    pass
