from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from frontend.services import issue_token


class Command(BaseCommand):
    help = "Print a new API token for USERNAME (use it as 'Authorization: Bearer <token>')."

    def add_arguments(self, parser):
        parser.add_argument("username")

    def handle(self, *args, username: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named '{username}'")
        # In the audit trail like a token an admin issues (issue 26, item 8).
        _, token = issue_token(None, user, via="manage.py create_token")
        self.stdout.write(token)
