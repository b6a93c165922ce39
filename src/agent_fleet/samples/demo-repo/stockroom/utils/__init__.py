"""Small helpers shared by every package."""

from stockroom.utils.dates import *
from stockroom.utils.strings import slugify, truncate
