"""planners"""
