import os


def main():
    rank = int(os.environ["RANK"])
    port = os.environ["MASTER_PORT"]
