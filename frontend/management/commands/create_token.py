from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from frontend.models import ApiToken


class Command(BaseCommand):
    help = "Print a new API token for USERNAME (use it as 'Authorization: Bearer <token>')."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named '{username}'")
        _, token = ApiToken.issue(user)
        self.stdout.write(token)
