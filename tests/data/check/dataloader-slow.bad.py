from torch.utils.data import DataLoader
from torchvision import datasets

train_set = datasets.ImageFolder("data/train", transform=transform)
loader = DataLoader(train_set, batch_size=64, shuffle=True)
