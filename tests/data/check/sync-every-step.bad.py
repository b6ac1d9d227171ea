running = 0.0
for step, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    running += loss.item()
