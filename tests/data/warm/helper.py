NAME = "helper"
