"""One epoch of training; the sampler is reseeded here."""


def train_one_epoch(loader, epoch):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        pass
