from trnlens.cli import entry

entry()
