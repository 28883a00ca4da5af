"""torchrec"""
