"""The polling-job machinery shared by appointment-timeout and expire-promotions."""
