import torch.nn as nn

model = nn.DataParallel(make_model()).cuda()
