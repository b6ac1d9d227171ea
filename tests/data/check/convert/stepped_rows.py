"""A one-GPU script with no DataLoader: the data is one tensor of rows, and the training loop steps
through it by index (`for start in range(0, len(rows), batch)`), as language-model scripts that batchify a
token stream do. Written for mgtutor's convert tests."""
import torch
import torch.nn as nn


def make_rows(count):
    generator = torch.Generator().manual_seed(0)
    return torch.rand(count, 9, generator=generator)


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rows = make_rows(101)
    model = nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    batch = 10
    for epoch in range(2):
        for step, start in enumerate(range(0, rows.size(0), batch)):
            chunk = rows[start:start + batch].to(device)
            loss = nn.functional.mse_loss(model(chunk[:, :8]), chunk[:, 8:])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch + 1} loss {loss.item():.4f}")
    torch.save(model.state_dict(), "stepped.pt")


if __name__ == "__main__":
    main()
